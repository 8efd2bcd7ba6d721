//! What an attacker tries against admission, on every path: directories
//! swapped for symlinks between runs, children asking more than their
//! parent, forged cluster jobs asking more than the worker allows.
