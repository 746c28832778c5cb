# evoscale_cc_library(NAME name [HDRS ...] SRCS ... DEPS ... [PRIVATE_DEPS ...])
#   Defines target evoscale_<name> with alias evoscale::<name>. Header-only when SRCS is empty.
function(evoscale_cc_library)
  cmake_parse_arguments(ARG "" "NAME" "HDRS;SRCS;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target evoscale_${ARG_NAME})
  if(ARG_SRCS)
    add_library(${target} STATIC ${ARG_SRCS} ${ARG_HDRS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
    target_compile_options(${target} PRIVATE ${EVOSCALE_WARNINGS})
  else()
    add_library(${target} INTERFACE)
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${target} INTERFACE ${ARG_DEPS})
  endif()
  add_library(evoscale::${ARG_NAME} ALIAS ${target})
endfunction()

# evoscale_cc_test(NAME name SRCS ... DEPS ... [LABELS ...] [SLOW_TESTS gtest-filter])
#   One gtest binary, registered with ctest test by test (gtest_discover_tests). Tests matching
#   SLOW_TESTS (those that run the real trainer) also carry the label "slow", so a quick run can
#   skip them: ctest -LE slow.
function(evoscale_cc_test)
  cmake_parse_arguments(ARG "" "NAME;SLOW_TESTS" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  target_include_directories(${ARG_NAME} PRIVATE ${PROJECT_SOURCE_DIR})
  # -Wno-restrict: GCC 12 warns, falsely, inside GoogleTest's protobuf printer when a matcher
  # prints a vector of messages (GCC bug 105651).
  target_compile_options(${ARG_NAME} PRIVATE ${EVOSCALE_WARNINGS} -Wno-restrict)
  target_compile_definitions(${ARG_NAME} PRIVATE
    EVOSCALE_BIN_DIR="${CMAKE_RUNTIME_OUTPUT_DIRECTORY}"
    EVOSCALE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Labels are set from a script of our own that ctest reads after gtest's list of tests:
  # gtest_discover_tests' PROPERTIES lose every label of a list but the first.
  if(ARG_SLOW_TESTS)
    gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 TEST_FILTER "-${ARG_SLOW_TESTS}"
                         TEST_LIST ${ARG_NAME}_TESTS)
    gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 TEST_FILTER "${ARG_SLOW_TESTS}"
                         TEST_LIST ${ARG_NAME}_SLOW_TESTS)
  else()
    gtest_discover_tests(${ARG_NAME} DISCOVERY_TIMEOUT 60 TEST_LIST ${ARG_NAME}_TESTS)
  endif()
  set(slow_labels ${ARG_LABELS} slow)
  set(labels_script ${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}_labels.cmake)
  file(WRITE ${labels_script}
       "foreach(t IN LISTS ${ARG_NAME}_TESTS)\n"
       "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${ARG_LABELS}\")\n"
       "endforeach()\n"
       "foreach(t IN LISTS ${ARG_NAME}_SLOW_TESTS)\n"
       "  set_tests_properties(\"\${t}\" PROPERTIES LABELS \"${slow_labels}\")\n"
       "endforeach()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_script})
endfunction()
