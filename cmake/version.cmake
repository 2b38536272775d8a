# Writes OUT, the version line of `ffn-trace --version`: the project's version, and the git commit
# when the source is a checkout. Run at every build (see CMakeLists.txt); configure_file rewrites
# OUT only when the line changed, so an unchanged commit recompiles nothing.
set(FFN_TRACE_COMMIT "")
find_package(Git QUIET)
if(GIT_FOUND AND EXISTS "${SOURCE_DIR}/.git")
  execute_process(COMMAND "${GIT_EXECUTABLE}" describe --always --dirty --abbrev=12 --exclude=*
                  WORKING_DIRECTORY "${SOURCE_DIR}" OUTPUT_VARIABLE FFN_TRACE_COMMIT
                  OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
  if(failed)
    set(FFN_TRACE_COMMIT "")
  endif()
endif()
if(FFN_TRACE_COMMIT)
  set(FFN_TRACE_VERSION_LINE "ffn-trace ${VERSION} (commit ${FFN_TRACE_COMMIT})")
else()
  set(FFN_TRACE_VERSION_LINE "ffn-trace ${VERSION}")
endif()
configure_file("${SOURCE_DIR}/src/cli/version.cpp.in" "${OUT}" @ONLY)
