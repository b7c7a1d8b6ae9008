#!/usr/bin/env bash
# tests/install_test.sh — the installed package works for an app outside the tree:
#  1. `cmake --install` of this build into a temporary prefix: exactly the five public headers
#     (starzero.h, starzero_starpu.h, starzero_train.h, starzero_gpt2.h, starzero_llama.h), each
#     compiling alone, and the example share/starzero/examples/ (custom_model.c, CMakeLists.txt);
#  2. tests/install/ (a separate CMake project) finds it with find_package(StarZeRO), with
#     PKG_CONFIG_PATH unset (the package finds StarPU & co. itself), and builds the MLP example
#     on the static and on the shared library, a GPT-2 header/library check and the LLaMA-style
#     model (it must learn); the installed examples directory builds as it is (find_package), with
#     -Wall -Wextra -Werror;
#  3. the same programs built with the C compiler and `pkg-config starzero[_gpt2|_llama]` alone,
#     custom_model.c with -Wall -Wextra -Werror and, in a CUDA build, the toolkit's include directory
#     also given with -I (as a StarPU built against CUDA elsewhere puts it in its flags): no warning
#     from the toolkit's headers (cusparse.h through starpu.h);
#  4. every program runs without LD_LIBRARY_PATH (the pkg-config flags carry an rpath): the MLP
#     example must learn (final loss < 0.1 after 200 steps); custom_model (CMake build) runs with
#     no arguments, learns (final loss < 0.05) and saves its state, the pkg-config build resumes it
#     in the same directory and trains on, and the installed sz-state verifies that directory.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR C_COMPILER STARPU_PKGCONFIG_DIR [EXTRA_LDFLAGS]
set -u
build=$1 src=$2 cc=$3 starpu_pc=$4 ldflags=${5:-}
corpus=none
. "$(dirname "$0")/cli_common.sh"   # $dir, fail
prefix=$dir/prefix
example=$src/apps/sz-mlp-example.c

cmake --install "$build" --prefix "$prefix" >"$dir/install.log" 2>&1 || { cat "$dir/install.log"; fail "cmake --install"; }
for f in include/starzero.h include/starzero_starpu.h include/starzero_train.h include/starzero_gpt2.h \
         share/starzero/examples/custom_model.c share/starzero/examples/CMakeLists.txt lib/libstarzero.a lib/libstarzero.so \
         lib/libstarzero_gpt2.a lib/libstarzero_gpt2.so lib/libstarzero_llama.a lib/libstarzero_llama.so include/starzero_llama.h \
         lib/cmake/StarZeRO/StarZeROConfig.cmake \
         lib/cmake/StarZeRO/StarZeROConfigVersion.cmake lib/pkgconfig/starzero.pc lib/pkgconfig/starzero_gpt2.pc bin/sz-train; do
    [ -e "$prefix/$f" ] || fail "not installed: $f"
done

# exactly the public headers, each one self-contained (compiles alone with the package's flags),
# none of the tree's private ones (sz_*.h)
headers=$(cd "$prefix/include" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')
[ "$headers" = "starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h starzero_train.h " ] \
    || fail "installed headers are \"$headers\", expected starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h starzero_train.h"
for h in starzero.h starzero_gpt2.h starzero_llama.h starzero_starpu.h starzero_train.h; do
    echo "#include \"$h\"" | PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc \
        "$cc" -fsyntax-only -x c - -I"$prefix/include" $(PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc pkg-config --cflags starzero) \
        || fail "installed $h does not compile on its own"
done
echo "ok: the five public headers are installed, each self-contained"

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
# the installed example's own CMakeLists.txt, as a user builds it, warnings as errors
(unset PKG_CONFIG_PATH
 cmake -S "$prefix/share/starzero/examples" -B "$dir/ex" -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" \
       -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" >"$dir/ex.log" 2>&1 &&
 cmake --build "$dir/ex" >>"$dir/ex.log" 2>&1) || { cat "$dir/ex.log"; fail "the installed examples directory does not build"; }
! grep -q "warning" "$dir/ex.log" || { grep -B2 -A2 warning "$dir/ex.log"; fail "warnings building the installed example (CMake)"; }
mkdir -p "$dir/run" && cd "$dir/run" || fail "cd $dir/run"
out=$(env -u LD_LIBRARY_PATH "$dir/ex/custom_model" 2>&1) || { echo "$out" | tail -5; fail "custom_model (CMake build, no arguments) exited $?"; }
echo "$out" | tail -1 | awk '/^final loss/ { exit !($3 < 0.05) } { exit 1 }' || fail "custom_model did not learn: $(echo "$out" | tail -1)"
[ "$(cat custom_model.state/latest)" = step-00000060 ] || fail "custom_model: custom_model.state/latest is not step-00000060"
echo "ok: installed example (CMake, no arguments): $(echo "$out" | tail -1), state in custom_model.state/step-00000060"
cd - >/dev/null || exit 1

# 3. pkg-config
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig:$starpu_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pkg-config --exists starzero starzero_gpt2 starzero_llama || fail "pkg-config does not find starzero: $(pkg-config --print-errors --exists starzero 2>&1)"
"$cc" -O2 -o "$dir/mlp-pc" "$example" $(pkg-config --cflags --libs starzero) $ldflags || fail "cc with pkg-config starzero"
"$cc" -O2 -o "$dir/gpt2-pc" "$src/tests/install/gpt2_check.c" $(pkg-config --cflags --libs starzero_gpt2) $ldflags \
    || fail "cc with pkg-config starzero_gpt2"
unset LD_LIBRARY_PATH # the programs find libstarzero and StarPU through the rpath pkg-config gave them
learns "$dir/mlp-pc"
"$dir/gpt2-pc" || fail "gpt2-check (pkg-config)"
"$cc" -O2 -o "$dir/llama-pc" "$src/tests/install/llama_check.c" $(pkg-config --cflags --libs starzero_llama) $ldflags \
    || fail "cc with pkg-config starzero_llama"
"$dir/llama-pc" || fail "llama-check (pkg-config)"
# the example with pkg-config, warnings as errors; in a CUDA build with the toolkit's headers also
# named by -I: they stay system headers (the .pc gives them with -isystem), so cusparse.h is quiet
cudainc=$(pkg-config --variable=cuda_includedir starzero)
if pkg-config --cflags starzero | grep -q SZ_HAVE_CUDA; then
    [ -n "$cudainc" ] && [ -f "$cudainc/cusparse.h" ] \
        || fail "a CUDA build, but starzero.pc's cuda_includedir ('$cudainc') does not hold cusparse.h"
    pkg-config --cflags starzero | grep -q -- "-isystem $cudainc" || fail "starzero.pc's Cflags lack -isystem $cudainc"
    extra="-I$cudainc"
else
    extra=""
fi
"$cc" -O2 -Wall -Wextra -Werror $extra -o "$dir/custom-pc" "$prefix/share/starzero/examples/custom_model.c" \
    $(pkg-config --cflags --libs starzero_gpt2) -lm $ldflags >"$dir/custom-pc.log" 2>&1 \
    || { head -20 "$dir/custom-pc.log"; fail "cc -Wall -Wextra -Werror ${extra:+$extra }custom_model.c \$(pkg-config --cflags --libs starzero_gpt2)"; }
echo "ok: custom_model.c builds with pkg-config, -Wall -Wextra -Werror${extra:+ and $extra}: no warnings"
cd "$dir/run" || fail "cd $dir/run"
out=$("$dir/custom-pc" --steps 70 2>&1) || { echo "$out" | tail -5; fail "custom_model (pkg-config build) --steps 70 exited $?"; }
echo "$out" | grep -q "^resuming from custom_model.state/step-00000060: step 60" || { echo "$out" | head -3; fail "custom_model --steps 70 did not resume from step 60"; }
echo "$out" | grep -q "^step 70/70: loss" || fail "custom_model --steps 70 did not train steps 61-70"
[ "$(cat custom_model.state/latest)" = step-00000070 ] || fail "custom_model: latest is not step-00000070 after the resumed run"
"$prefix/bin/sz-state" --quiet custom_model.state >/dev/null || fail "the installed sz-state does not verify custom_model.state"
echo "ok: installed example (pkg-config, no LD_LIBRARY_PATH): resumed the CMake build's state at step 60, saved step 70; sz-state verifies it"
cd - >/dev/null || exit 1
echo "PASS"
