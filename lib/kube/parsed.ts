// What parsing a program's flags or a file it was pointed at gives: the value, or one error
// line that says what to change. Shared so that a program's folders need not import each other
// for the type.
export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };
