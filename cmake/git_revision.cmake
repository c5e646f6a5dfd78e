# Writes the git revision of SOURCE_DIR into OUT (from IN), at every build: configure_file
# rewrites OUT only when the revision changed, so an unchanged revision recompiles nothing.
# The revision is HEAD's short hash, with "+dirty" when tracked files differ from HEAD (the
# build then holds changes no commit records), or "unknown" outside a git checkout.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE BRICKDL_GIT_REVISION OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE head_status ERROR_QUIET)
if(NOT head_status EQUAL 0 OR NOT BRICKDL_GIT_REVISION)
  set(BRICKDL_GIT_REVISION "unknown")
else()
  execute_process(COMMAND git diff --quiet HEAD -- WORKING_DIRECTORY ${SOURCE_DIR}
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    string(APPEND BRICKDL_GIT_REVISION "+dirty")
  endif()
endif()
configure_file(${IN} ${OUT} @ONLY)
