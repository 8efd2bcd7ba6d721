/** An error from `moat serve`, or from the connection to it. */
export class MoatError extends Error {
    /** The protocol code (or `CONNECTION_CLOSED` / `PROTOCOL_ERROR`). */
    code;
    /** What else the server said, e.g. `{results}` of a failed `await`. */
    data;
    constructor(code, message, data, options) {
        super(message, options);
        this.name = 'MoatError';
        this.code = code;
        this.data = data;
    }
    /** The results of a `RUN_FAILED` await, when the server sent them. */
    get results() {
        const data = this.data;
        return data && typeof data === 'object' ? data.results : undefined;
    }
}
/** Whether `error` is a {@link MoatError}, optionally of `code`. */
export function isMoatError(error, code) {
    return error instanceof MoatError && (code === undefined || error.code === code);
}
//# sourceMappingURL=errors.js.map