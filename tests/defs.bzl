"""airlock_integration_test: a cc_test that runs the real daemons and CLI."""

DAEMONS = [
    "//apid",
    "//gitd",
    "//policyd",
    "//proxyd",
    "//secretsd",
    "//vmmd",
]

def airlock_integration_test(name, vm = False, deps = [], data = [], tags = [], **kwargs):
    """A test in tests/ that starts the real binaries.

    Args:
      name: test name; the source is <name>.cc.
      vm: boots real QEMU guests (needs the images, both cores: exclusive).
      deps: extra deps beside the harness and gtest.
      data: extra runfiles (fixtures).
      tags: extra tags ("manual": only run when named).
      **kwargs: passed to cc_test.
    """

    # A VM test takes up to 6 minutes here; a hang must not eat the CI
    # run's budget (Bazel's "enormous" waits an hour): 15 minutes at most.
    timeout = kwargs.pop("timeout", "long" if vm else "moderate")
    native.cc_test(
        name = name,
        size = "enormous" if vm else "medium",
        timeout = timeout,
        srcs = [name + ".cc"],
        data = DAEMONS + ["//cli:airlock"] + data,
        tags = ["no-sandbox"] + (["exclusive"] if vm else []) + tags,
        deps = deps + [
            "//common:fd_io",
            "//common:subprocess",
            "//common/testing:harness",
            "//third_party:gtest_main",
            "//third_party:json",
        ],
        **kwargs
    )
