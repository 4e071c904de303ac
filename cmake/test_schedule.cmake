# How ctest runs the suite on make test's two cores (included by
# CMakeLists.txt once every test is defined). Changes no test's checks.
#
# 1. The longest tests start first. ctest -j starts tests in order of COST,
#    highest first, and a test's cost is its time from the last run
#    (Testing/Temporary/CTestCostData.txt) or else this property. A clean
#    clone, which is what CI runs, has no cost file: every test cost 0 and
#    they started in name order, the longest (test_sweep_report,
#    test_tokenizer_hf, test_tool_templates, 90-123 s each under ASan) among
#    the last, one core idle while they finished. The figures are seconds:
#    under ASan on the CI's 2 cores where known (the three above), else the
#    Release suite on 2 cores shared with other builds; only their order
#    matters, and after one run ctest's own measurements replace them.
set(TPS_TEST_COSTS
    test_sweep_report 120 test_tool_templates 100 test_quant_reference 84 test_agent_sdks 77
    test_bench_tokenizer_hf 75 test_openai_sdk 72 test_structured_output 70
    test_arch_reference 61 test_harmony_serve 59 test_tokenizer_hf 45 test_machine_limits 36
    test_reasoning 33 test_bench_dialects 33 test_hostile_clients 31 test_plan 30
    test_bench_capacity 29 test_server_bounds 29 test_jinja_hostile 29 test_machine_load 26
    test_request_fields 24 test_bench_workloads 22 test_engine 21 test_reliability 21
    test_moe_engine 20 test_kernels 17 test_server 17)
list(LENGTH TPS_TEST_COSTS n)
math(EXPR last "${n} - 1")
foreach(i RANGE 0 ${last} 2)
  math(EXPR j "${i} + 1")
  list(GET TPS_TEST_COSTS ${i} name)
  list(GET TPS_TEST_COSTS ${j} cost)
  if(TEST ${name})
    set_tests_properties(${name} PROPERTIES COST ${cost})
  endif()
endforeach()

# 2. A test's idle OpenMP threads sleep. The one parallel region in tps is
#    model make's tensor fill (src/model/model_make.c); after each tensor
#    libgomp's workers spin for milliseconds before they sleep, and the
#    tests make models by the hundred (in-process and through tps model
#    make): half of test_tool_templates' CPU seconds (26 -> 13 in Release)
#    were that spin, taken from the test running on the other core.
#    OMP_WAIT_POLICY=passive parks them at once; the kernels do not use
#    OpenMP (src/kernels/pool.h), so no result and no measured figure moves.
get_property(tps_tests DIRECTORY PROPERTY TESTS)
foreach(t ${tps_tests})
  set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT OMP_WAIT_POLICY=passive)
endforeach()
