// A chat template compiled and rendered as transformers renders it for SGLang
// (utils/chat_template_utils.py `render_jinja_template`): trim_blocks and
// lstrip_blocks on, `raise_exception`, `strftime_now` and a Python-style
// `tojson` (all @huggingface/jinja defaults), and the variables `messages`,
// `tools` and `documents` (None: SGLang passes no tools here),
// `add_generation_prompt`, every named special token, then the request's
// template kwargs over them.

import { Template } from '@huggingface/jinja';
import { detectContentFormat, type ContentFormat } from './content-format.ts';
import type { ChatIssue, Result } from './issues.ts';
import type { TemplateMessage } from './messages.ts';

export interface ChatTemplate {
  readonly source: string;
  readonly format: ContentFormat;
  render(
    messages: readonly TemplateMessage[],
    vars: Readonly<Record<string, unknown>>,
  ): Result<string, ChatIssue>;
}

export function compileTemplate(source: string): Result<ChatTemplate, string> {
  let compiled: Template;
  try {
    compiled = new Template(source);
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
  const render: ChatTemplate['render'] = (messages, vars) => {
    try {
      const text = compiled.render({
        ...vars,
        messages,
        tools: null,
        documents: null,
        add_generation_prompt: true,
      });
      return { ok: true, value: text };
    } catch (err) {
      return { ok: false, error: { code: 'template-error', message: (err as Error).message } };
    }
  };
  return { ok: true, value: { source, format: detectContentFormat(source, compiled), render } };
}
