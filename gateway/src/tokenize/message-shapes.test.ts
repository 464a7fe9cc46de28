import { describe, expect, it } from 'vitest';
import { readChatMessages } from './message-shapes.ts';
import { ChatMessage } from './messages.ts';

const ChatMessages = ChatMessage.array();

const TAKEN: Record<string, unknown[]> = {
  plain: [
    { role: 'system', content: 'be brief' },
    { role: 'user', content: 'hi' },
  ],
  partsAndNulls: [
    { role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'image_url' }] },
    { role: 'assistant', content: null, name: null, reasoning_content: 'why' },
    { role: 'tool', content: 'r', tool_call_id: 'c1', extra: { kept: true } },
    { role: 'assistant' },
  ],
};

const LEFT: Record<string, unknown[]> = {
  emptyRole: [{ role: '', content: 'x' }],
  noRole: [{ content: 'x' }],
  numberName: [{ role: 'user', content: 'x', name: 1 }],
  numberToolCallId: [{ role: 'tool', content: 'x', tool_call_id: 7 }],
  objectReasoning: [{ role: 'assistant', content: 'x', reasoning_content: {} }],
  numberContent: [{ role: 'user', content: 1 }],
  partNoType: [{ role: 'user', content: [{ text: 'a' }] }],
  notAnObject: ['hi'],
};

describe('readChatMessages', () => {
  it.each(Object.entries(TAKEN))('takes %s as they are, as the schema does', (_, messages) => {
    const schema = ChatMessages.safeParse(messages);
    expect(schema.success).toBe(true);
    const read = readChatMessages(messages);
    expect(read).toBe(messages);
    expect(read).toEqual(schema.data);
  });

  it.each(Object.entries(LEFT))('leaves %s to the schema, which refuses them', (_, messages) => {
    expect(ChatMessages.safeParse(messages).success).toBe(false);
    expect(readChatMessages(messages)).toBeUndefined();
  });
});
