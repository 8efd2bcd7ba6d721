"""Builds Python moat adapters into WebAssembly components.

`python -m moat_adapter_build component --app MODULE --path DIR -o OUT.wasm`
stages the WIT (`wit`), generates the bindings and runs componentize-py
(`build`), then removes componentize-py's internal export (`strip`). It runs
on the build machine; nothing of it goes into the component.
"""
