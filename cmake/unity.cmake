# Unity builds (MIXPREC_UNITY_BUILD, off by default): CI's sanitizer, fuzzer and arm64 builds
# compile every source once with a cold compiler cache, and most of a library file's time there
# is the same headers parsed and the same inline functions instrumented and compiled again in
# every file (under ASan, 12 files of src/core/ cost 11 CPU s one by one and 3.7 s as one unit).
# A developer's build stays one object per source, so an edit recompiles one file.
#
# mixprec_unity_groups(TARGET SOURCES...) puts the sources of TARGET into groups of at most
# MIXPREC_UNITY_GROUP_SIZE files of one folder (src/<folder>/, tests/<folder>/): a group never
# mixes two floors of docs/ARCHITECTURE.md, so tests/layers/check_links.py still reads each
# object as one floor's. Two files that define the same file-local name (in an anonymous
# namespace or static, on a line that starts in column 0: `constexpr std::int64_t kChunk = ...`,
# `struct Problem {`, `void fail(...)`) never share a group, so no source needs renaming.
# Compiled alone:
#  - Highway kernel files (*_simd.cpp and anything including hwy/foreach_target.h): they
#    re-include themselves once per SIMD target;
#  - sources with their own compile definitions or options (CMake compiles them alone anyway);
#  - the files of MIXPREC_UNITY_EXCLUDE below, where a name of one file hides another's in
#    the same namespace (a lookup the column-0 rule cannot see).
option(MIXPREC_UNITY_BUILD "Compile sources in groups of one folder (CI's non-release builds)" OFF)
set(MIXPREC_UNITY_GROUP_SIZE 12 CACHE STRING "Sources per unity group (MIXPREC_UNITY_BUILD)")
set(MIXPREC_UNITY_EXCLUDE
  # calls mixprec::random_bits(seed, i) from kernels::ref, where a neighbour's header declares
  # kernels::ref::random_bits(seed, offset, out, n), which hides it
  src/kernels/ref/convert_ref.cpp
  # declares mixprec::runtime::to_string(Fp8Recipe), which hides mixprec::to_string(Shape)
  src/runtime/fp8_recipe.cpp
  # names mixprec::detail::TensorImpl as detail::, which mixprec::train::detail hides
  src/train/inspect.cpp
  # its fixture's base, testing::TestWithParam<Case>, stops naming gtest's template beside the
  # other conformance files
  tests/conformance/test_device_conformance.cpp)

# kOp, the operation name a file's errors carry (`constexpr const char* kOp = "...";` in an
# anonymous namespace), is defined by a third of the sources: in a unity source each file's kOp
# is renamed by the preprocessor to one of its own (kOp_<CMake's unique id of the file>).
string(JOIN "\n" MIXPREC_UNITY_BEFORE
  "#define MIXPREC_UNITY_CAT2(a, b) a##b"
  "#define MIXPREC_UNITY_CAT(a, b) MIXPREC_UNITY_CAT2(a, b)"
  "#define kOp MIXPREC_UNITY_CAT(kOp_, MIXPREC_UNITY_ID)")

if(MIXPREC_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # A class of a .cpp file with a member of an anonymous-namespace type is fine on its own; in a
  # unity source every .cpp is an included file, which GCC's -Wsubobject-linkage flags.
  add_compile_options(-Wno-subobject-linkage)
endif()

# The names a source defines at file scope in an anonymous namespace (`namespace {` to
# `}  // namespace`, both in column 0, the project's style) or as static, into OUT.
function(mixprec_unity_file_scope_names src out)
  file(STRINGS ${src} lines REGEX "^([A-Za-z_]|}  // namespace$)")
  set(names "")
  set(anonymous OFF)
  foreach(line IN LISTS lines)
    if(line MATCHES "^namespace {")
      set(anonymous ON)
      continue()
    elseif(line MATCHES "^}")
      set(anonymous OFF)
      continue()
    elseif(NOT anonymous AND NOT line MATCHES "^static ")
      continue()  # a public definition: the linker already keeps those unique
    elseif(line MATCHES "^(namespace|using namespace|template|extern \"C\"|TEST|TYPED_TEST|INSTANTIATE)")
      continue()
    endif()
    if(line MATCHES "^(struct|class|union|enum class|enum struct|enum) +([A-Za-z_][A-Za-z0-9_]*)")
      list(APPEND names ${CMAKE_MATCH_2})
    elseif(line MATCHES "^using +([A-Za-z_][A-Za-z0-9_]*) *=")
      list(APPEND names ${CMAKE_MATCH_1})
    elseif(line MATCHES "^[^=(]*[ *&]([A-Za-z_][A-Za-z0-9_]*) *(\\(|=|\\{|\\[|;)")
      list(APPEND names ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES names)
  list(REMOVE_ITEM names kOp)  # one per file by convention; renamed per file below
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

function(mixprec_unity_groups target)
  if(NOT MIXPREC_UNITY_BUILD)
    return()
  endif()
  set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP
    UNITY_BUILD_UNIQUE_ID MIXPREC_UNITY_ID
    UNITY_BUILD_CODE_BEFORE_INCLUDE "${MIXPREC_UNITY_BEFORE}" UNITY_BUILD_CODE_AFTER_INCLUDE "#undef kOp")
  set(folder "")
  set(groups 0)
  foreach(src IN LISTS ARGN)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${src})
    get_source_file_property(defs ${src} COMPILE_DEFINITIONS)
    get_source_file_property(opts ${src} COMPILE_OPTIONS)
    set(alone OFF)
    if(rel MATCHES "_simd\\.cpp$" OR rel IN_LIST MIXPREC_UNITY_EXCLUDE OR defs OR opts)
      set(alone ON)
    else()
      file(STRINGS ${src} foreach_target REGEX "#include +[<\"]hwy/foreach_target\\.h[>\"]")
      if(foreach_target)
        set(alone ON)
      endif()
    endif()
    if(alone)
      set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES
                                  SKIP_UNITY_BUILD_INCLUSION ON)
      continue()
    endif()
    # The folder: src/kernels/cpu/x.cpp -> kernels, tests/core/y.cpp -> core.
    string(REGEX REPLACE "^[^/]+/([^/]+)/.*" "\\1" top ${rel})
    string(REGEX REPLACE "[^A-Za-z0-9_]" "_" top ${top})
    if(NOT top STREQUAL folder)
      set(folder ${top})
      set(first ${groups})  # groups of earlier folders are closed
    endif()
    mixprec_unity_file_scope_names(${src} names)
    # First fit: the first group of this folder with room and none of the file's names.
    set(chosen "")
    set(g ${first})
    while(g LESS groups AND chosen STREQUAL "")
      if(count_${g} LESS MIXPREC_UNITY_GROUP_SIZE)
        set(clash OFF)
        foreach(n IN LISTS names)
          if(DEFINED name_${g}_${n})
            set(clash ON)
            break()
          endif()
        endforeach()
        if(NOT clash)
          set(chosen ${g})
        endif()
      endif()
      math(EXPR g "${g} + 1")
    endwhile()
    if(chosen STREQUAL "")
      set(chosen ${groups})
      set(count_${chosen} 0)
      math(EXPR groups "${groups} + 1")
    endif()
    math(EXPR count_${chosen} "${count_${chosen}} + 1")
    foreach(n IN LISTS names)
      set(name_${chosen}_${n} 1)
    endforeach()
    set_source_files_properties(${src} TARGET_DIRECTORY ${target} PROPERTIES
                                UNITY_GROUP "${target}_${top}_${chosen}")
  endforeach()
endfunction()
