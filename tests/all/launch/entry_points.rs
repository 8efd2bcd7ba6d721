//! Every entry point that starts runs refuses the same way, finishes a
//! failing run's record, and lets its runs nest (`fanout`).
