# fg_super.cmake - the supervisor as a library (fg_super.c, fg_super_proc.c),
# for the `flexgen` executable and the runtime tests. Included once by
# whichever CMakeLists gets there first:
#   if(NOT TARGET fg_super) include(${PROJECT_SOURCE_DIR}/coordinator/fg_super.cmake) endif()
add_library(fg_super STATIC
  ${CMAKE_CURRENT_LIST_DIR}/fg_super.c
  ${CMAKE_CURRENT_LIST_DIR}/fg_super_proc.c)
target_include_directories(fg_super PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(fg_super PUBLIC fg_proto fg_shm fg_common PkgConfig::ZMQ Threads::Threads)
