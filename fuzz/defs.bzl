"""airlock_fuzz_target: a libFuzzer target, replayed by the normal tests."""

def airlock_fuzz_target(name, deps):
    """NAME_fuzz.cc, with its seed corpus in corpus/NAME and its crashes in regressions/NAME.

    Args:
      name: the target's name.
      deps: what the target calls.

    Makes :NAME_fuzz_lib (the LLVMFuzzerTestOneInput of the target, for
    bench/fuzz.sh to list) and :NAME_replay_test, which runs every checked-in
    input through it with the project's normal compiler.
    """
    native.cc_library(
        name = name + "_fuzz_lib",
        srcs = [name + "_fuzz.cc"],
        deps = deps + [":fuzz_check"],
    )
    native.cc_test(
        name = name + "_replay_test",
        size = "small",
        srcs = ["replay_main.cc"],
        args = ["fuzz/corpus/" + name, "fuzz/regressions/" + name],
        data = native.glob(["corpus/" + name + "/**", "regressions/" + name + "/**"]),
        deps = [":" + name + "_fuzz_lib"],
    )
