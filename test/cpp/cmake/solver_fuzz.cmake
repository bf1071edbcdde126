# Reader fuzzer under AddressSanitizer + UBSan. Not part of `all`: built and run
# by `make test-fuzz` (which `make test-cpp` depends on). -g1: line tables for the
# sanitizers' reports without full type information, which doubled each compile
# (planner.cpp under ASan: 37 s with -g, 19 s with -g1).
add_executable(solver_fuzz EXCLUDE_FROM_ALL
  ${CMAKE_SOURCE_DIR}/test/cpp/solver_fuzz.cpp
  ${CMAKE_SOURCE_DIR}/csrc/core/solver/problem.cpp
  ${CMAKE_SOURCE_DIR}/csrc/core/solver/problem_io.cpp
  ${CMAKE_SOURCE_DIR}/csrc/core/solver/highs_api.cpp
  ${CMAKE_SOURCE_DIR}/csrc/core/json.cpp)
target_include_directories(solver_fuzz PRIVATE ${CMAKE_SOURCE_DIR}/csrc ${CMAKE_SOURCE_DIR}/test/cpp)
target_compile_options(solver_fuzz PRIVATE -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined
                       -fno-sanitize-recover=all)
target_link_options(solver_fuzz PRIVATE -fsanitize=address,undefined)
target_link_libraries(solver_fuzz PRIVATE ${CMAKE_DL_LIBS})

# JSON / planner IR / options / calibration reader fuzzer (json_fuzz.cpp): the
# whole torch-free core except the solver, under the same sanitizers.
file(GLOB FUZZ_CORE_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/csrc/core/*.cpp
     ${CMAKE_SOURCE_DIR}/csrc/core/strategies/*.cpp ${CMAKE_SOURCE_DIR}/csrc/core/solver/*.cpp)
add_executable(json_fuzz EXCLUDE_FROM_ALL ${CMAKE_SOURCE_DIR}/test/cpp/json_fuzz.cpp ${FUZZ_CORE_SOURCES})
target_include_directories(json_fuzz PRIVATE ${CMAKE_SOURCE_DIR}/csrc ${CMAKE_SOURCE_DIR}/test/cpp)
target_compile_options(json_fuzz PRIVATE -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined
                       -fno-sanitize-recover=all)
target_link_options(json_fuzz PRIVATE -fsanitize=address,undefined)
find_package(Threads REQUIRED)
target_link_libraries(json_fuzz PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
