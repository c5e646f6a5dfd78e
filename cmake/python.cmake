# Finds the interpreter the Python package is built for and nanobind (included from the top
# CMakeLists.txt). Sets BRICKDL_HAVE_PYTHON, or says in brickdl_python_missing what is missing.
#
# The interpreter: Python_EXECUTABLE when given (pip install . gives its own), else the project's
# .venv (scripts/install-deps.sh makes it), else the first python3 on the PATH. nanobind: its
# CMake package from the interpreter's site-packages (`python -m nanobind --cmake_dir`), unless
# nanobind_ROOT is set already (scikit-build-core sets it from nanobind's entry point).
if(NOT DEFINED Python_EXECUTABLE AND EXISTS ${PROJECT_SOURCE_DIR}/.venv/bin/python)
  set(Python_EXECUTABLE ${PROJECT_SOURCE_DIR}/.venv/bin/python)
endif()
find_package(Python 3.9 COMPONENTS Interpreter Development.Module)
if(NOT Python_FOUND)
  set(brickdl_python_missing "no Python 3.9+ interpreter with its headers was found (Debian: "
                             "python3-dev)")
  return()
endif()
if(NOT nanobind_ROOT)
  execute_process(
    COMMAND ${Python_EXECUTABLE} -m nanobind --cmake_dir
    OUTPUT_VARIABLE nanobind_ROOT
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
    RESULT_VARIABLE brickdl_nanobind_status)
  if(NOT brickdl_nanobind_status EQUAL 0)
    set(brickdl_python_missing
        "${Python_EXECUTABLE} has no nanobind (scripts/install-deps.sh installs it into .venv)")
    unset(nanobind_ROOT)
    return()
  endif()
endif()
find_package(nanobind CONFIG)
if(NOT nanobind_FOUND)
  set(brickdl_python_missing "nanobind's CMake package was not found under ${nanobind_ROOT}")
  return()
endif()
set(BRICKDL_HAVE_PYTHON ON)
message(STATUS "brickdl: Python package for ${Python_EXECUTABLE} (Python ${Python_VERSION})")
