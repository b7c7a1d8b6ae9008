#!/usr/bin/env bash
# tests/install_test.sh — the installed package works for an app outside the tree:
#  1. `cmake --install` of this build into a temporary prefix: exactly the four public headers
#     (starzero.h, starzero_starpu.h, starzero_gpt2.h, starzero_llama.h), each compiling alone;
#  2. tests/install/ (a separate CMake project) finds it with find_package(StarZeRO), with
#     PKG_CONFIG_PATH unset (the package finds StarPU & co. itself), and builds the custom-model
#     example on the static and on the shared library, a GPT-2 header/library check and the
#     LLaMA-style model (it must learn);
#  3. the same example and check built with the C compiler and `pkg-config starzero[_gpt2]` alone;
#  4. every program runs: the example must learn (final loss < 0.1 after 200 steps), and an
#     installed command runs without LD_LIBRARY_PATH.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR C_COMPILER STARPU_PKGCONFIG_DIR [EXTRA_LDFLAGS]
set -u
build=$1 src=$2 cc=$3 starpu_pc=$4 ldflags=${5:-}
corpus=none
. "$(dirname "$0")/cli_common.sh"   # $dir, fail
prefix=$dir/prefix
example=$src/apps/sz-mlp-example.c

cmake --install "$build" --prefix "$prefix" >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; fail "cmake --install"; }
for f in include/starzero.h include/starzero_starpu.h include/starzero_gpt2.h lib/libstarzero.a lib/libstarzero.so \
         lib/libstarzero_gpt2.a lib/libstarzero_gpt2.so lib/libstarzero_llama.a lib/libstarzero_llama.so include/starzero_llama.h \
         lib/cmake/StarZeRO/StarZeROConfig.cmake \
         lib/cmake/StarZeRO/StarZeROConfigVersion.cmake lib/pkgconfig/starzero.pc lib/pkgconfig/starzero_gpt2.pc bin/sz-train; do
    [ -e "$prefix/$f" ] || fail "not installed: $f"
done

# exactly the public headers, each one self-contained (compiles alone with the package's flags),
# none of the tree's private ones (sz_*.h)
headers=$(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')
[ "$headers" = "starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h " ] \
    || fail "installed headers are \"$headers\", expected starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h"
for h in starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h; do
    echo "#include \"$h\"" | PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc \
        "$cc" -fsyntax-only -x c - -I"$prefix/include" $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc pkg-config --cflags starzero) \
        || fail "installed $h does not compile on its own"
done
echo "ok: the four public headers are installed, each self-contained"

# the installed commands run without the environment (their RPATH finds StarPU & co.)
est=$(env -u LD_LIBRARY_PATH "$prefix/bin/sz-estimate" --params 7.5e9 --nd 64 2>&1) || fail "installed sz-estimate: $est"
echo "$est" | grep -q "120" || fail "installed sz-estimate printed: $est"
echo "ok: installed sz-estimate runs"

# learns RUN...: the example's last line is "step 200 loss X"; it must reach < 0.1
learns() {
    out=$("$@" 200) || fail "$* exited with $?"
    echo "$out" | tail -1 | awk '{ exit !($4 < 0.1) }' || fail "$*: did not learn: $(echo "$out" | tail -1)"
    echo "ok: $1: $(echo "$out" | tail -1)"
}

# 2. find_package
(unset PKG_CONFIG_PATH
 cmake -S "$src/tests/install" -B "$dir/app" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
       -DSZ_EXAMPLE_SOURCE="$example" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" >"$dir/app.log" 2>&1 &&
 cmake --build "$dir/app" -j2 >>"$dir/app.log" 2>&1) || { cat "$dir/app.log"; fail "find_package(StarZeRO) build"; }
learns "$dir/app/mlp-static"
learns "$dir/app/mlp-shared"
"$dir/app/gpt2-check" || fail "gpt2-check (CMake)"
"$dir/app/llama-check" || fail "llama-check (CMake): the installed LLaMA model did not learn"

# 3. pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pkg-config --exists starzero starzero_gpt2 starzero_llama || fail "pkg-config does not find starzero: $(pkg-config --print-errors --exists starzero 2>&1)"
"$cc" -O2 -o "$dir/mlp-pc" "$example" $(pkg-config --cflags --libs starzero) $ldflags || fail "cc with pkg-config starzero"
"$cc" -O2 -o "$dir/gpt2-pc" "$src/tests/install/gpt2_check.c" $(pkg-config --cflags --libs starzero_gpt2) $ldflags \
    || fail "cc with pkg-config starzero_gpt2"
export LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
learns "$dir/mlp-pc"
"$dir/gpt2-pc" || fail "gpt2-check (pkg-config)"
"$cc" -O2 -o "$dir/llama-pc" "$src/tests/install/llama_check.c" $(pkg-config --cflags --libs starzero_llama) $ldflags \
    || fail "cc with pkg-config starzero_llama"
"$dir/llama-pc" || fail "llama-check (pkg-config)"
echo "PASS"
