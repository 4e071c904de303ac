# The C dialect every tps build compiles: C17 without GNU extensions
# (_GNU_SOURCE is defined where POSIX and Linux calls need it), Release
# unless a build type is given. Included by the root CMakeLists.txt and by
# tests/arm's cross build, so the two cannot drift apart.
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_STANDARD_REQUIRED ON)
set(CMAKE_C_EXTENSIONS OFF)
if(NOT CMAKE_BUILD_TYPE)
  set(CMAKE_BUILD_TYPE Release)
endif()
