//! What is refused before compiling: the compiler's memory grows with the
//! size of the function it compiles (a 7.6 MB component made of one huge
//! function drove the host past 3.8 GiB before the compile timeout), so a
//! function larger than any real adapter has is refused up front, cheaply,
//! by reading the code sections (every core module of the component).

use wasmparser::{Parser, Payload};

use crate::error::LoadError;

/// Largest function body compiled by default. Real adapters' largest
/// functions are tens of KiB (Rust) to a few hundred KiB (interpreters
/// built into components); compiling 1 MiB takes well under 1 GiB.
pub const DEFAULT_MAX_FUNCTION_BYTES: usize = 1024 * 1024;

/// Refuses `bytes` when one of its functions is over `max_function_bytes`.
/// Malformed input is left to the compiler, which says what is wrong.
pub(crate) fn check_functions(bytes: &[u8], max_function_bytes: usize) -> Result<(), LoadError> {
    let mut index = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload {
            Ok(Payload::CodeSectionEntry(body)) => {
                let size = body.range().len();
                if size > max_function_bytes {
                    return Err(LoadError::FunctionTooLarge {
                        index,
                        size,
                        limit: max_function_bytes,
                    });
                }
                index += 1;
            }
            Ok(_) => {}
            Err(_) => return Ok(()),
        }
    }
    Ok(())
}
