# braid_unity(TARGET): compile TARGET's sources in batches when BRAID_UNITY is
# on (CMakeLists.txt says why). Files listed in BRAID_UNITY_ALONE define
# file-local names (anonymous namespaces, statics) that another file of the
# same target defines too, so they are compiled on their own. vmath.cc sets
# its own optimisation flags (#pragma GCC optimize), which in a batch reach
# the files after it and keep std::min/max from inlining into its loops: its
# vectorised exp measured as a scalar loop with calls in a batch.
set(BRAID_UNITY_ALONE
  braid/comm/store/server.cc
  braid/comm/store/store.cc
  braid/comm/transport/inproc.cc
  braid/comm/transport/shm.cc
  braid/comm/transport/shm_ring.cc
  braid/comm/transport/stream.cc
  braid/ops/linear.cc
  braid/parallel/zero/zero_stage3.cc
  braid/tensor/cpu/reduce.cc
  braid/tensor/cpu/vmath.cc
)

function(braid_unity target)
  if(NOT BRAID_UNITY)
    return()
  endif()
  # 8 files a batch: most of the saving, and an edit still recompiles only its batch.
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  # In a batch, a class of one file may hold a type from another file's
  # anonymous namespace; GCC warns of that only because the file is included.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
  foreach(f ${BRAID_UNITY_ALONE})
    set_source_files_properties(${PROJECT_SOURCE_DIR}/${f} TARGET_DIRECTORY ${target}
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
  endforeach()
endfunction()
