//! Hand-made WebAssembly binaries, for inputs no toolchain would produce.

fn leb(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    leb(body.len(), out);
    out.extend_from_slice(body);
}

/// A component holding one core module with one function whose body is
/// `body_bytes` `nop`s: what a hostile author would send to make the
/// compiler eat memory.
pub fn component_with_function(body_bytes: usize) -> Vec<u8> {
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut module); // type 0: [] -> []
    section(3, &[1, 0], &mut module); // function 0 has type 0
    let mut body = vec![0]; // no locals
    body.extend(std::iter::repeat_n(0x01, body_bytes)); // nop
    body.push(0x0b); // end
    let mut code = vec![1];
    leb(body.len(), &mut code);
    code.extend(body);
    section(10, &code, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component); // a core module section
    component
}
