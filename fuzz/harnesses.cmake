# The libFuzzer harnesses, one per decoder of bytes from outside (fuzz/<name>.cc,
# seeds in fuzz/corpus/<name>/); read by fuzz/CMakeLists.txt (to build them)
# and fuzz/tests.cmake (to run them).
set(BRAID_FUZZ_HARNESSES
  transport_frames store_protocol ps_protocol
  safetensors checkpoint_sidecar
  idx csv libsvm linear_libsvm
  toml_config)
