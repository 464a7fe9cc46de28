import { Template } from '@huggingface/jinja';
import { describe, expect, it } from 'vitest';
import { detectContentFormat } from './content-format.ts';

// Each answer is SGLang 0.5.23's detect_jinja_template_content_format for the same template.
describe('detectContentFormat', () => {
  it.each([
    ["{% for m in messages %}{{ m['content'] }}{% endfor %}", 'string'],
    [
      "{% for message in messages %}{% for c in message['content'] %}{{ c.text }}{% endfor %}{% endfor %}",
      'openai',
    ],
    [
      '{% for message in messages %}{% for c in message.content %}{{ c.text }}{% endfor %}{% endfor %}',
      'openai',
    ],
    [
      "{% for message in messages %}{% for c in message.content if c.type == 'text' %}{% endfor %}{% endfor %}",
      'openai',
    ],
    ["{% for message in messages %}{% for c in message['content'][1:] %}{% endfor %}{% endfor %}", 'openai'],
    [
      "{% for message in messages %}{% for c in message['content'] | reverse %}{% endfor %}{% endfor %}",
      'openai',
    ],
    ['{% for msg in messages %}{% for c in msg.content %}{{ c }}{% endfor %}{% endfor %}', 'openai'],
    ['{% for x in messages %}{% for c in x.content %}{{ c }}{% endfor %}{% endfor %}', 'string'],
    [
      '{% macro r(message) %}{% for c in message.content %}{% endfor %}{% endmacro %}{{ r(messages[0]) }}',
      'openai',
    ],
    [
      '{% if true %}{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}{% endif %}',
      'openai',
    ],
    ['{{ messages[0].content }} with an image', 'openai'],
  ])('%s → %s', (source, format) => {
    expect(detectContentFormat(source, new Template(source))).toBe(format);
  });

  it('is string when the template does not parse', () => {
    expect(detectContentFormat('{% for %}', undefined)).toBe('string');
  });
});
