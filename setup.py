"""The compiled kernels (the rest of the build is in pyproject.toml).

Each kernel is optional: without a C compiler, or when one fails to build,
Python does its work, slower. The build then says so in one line (and
``xcep --version`` tells which kernels are in use).
"""

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

KERNELS = [
    Extension(
        "xcep.events._tokenizer", ["src/xcep/events/_tokenizer.c"], extra_compile_args=["-O2"]
    ),
    Extension(
        "xcep.xpush._states",
        ["src/xcep/xpush/_states.c", "src/xcep/xpush/plan_reader.c"],
        depends=["src/xcep/xpush/filter_text.h"],
        extra_compile_args=["-O2"],
    ),
    Extension("xcep.xseq._quiet", ["src/xcep/xseq/_quiet.c"], extra_compile_args=["-O2"]),
    Extension(
        "xcep.xseq._lists",
        ["src/xcep/xseq/_lists.c"],
        depends=["src/xcep/xseq/numbers.h"],
        extra_compile_args=["-O2"],
    ),
    Extension(
        "xcep.xseq._vm",
        ["src/xcep/xseq/_vm.c"],
        depends=["src/xcep/xseq/numbers.h"],
        extra_compile_args=["-O2"],
    ),
]


class OptionalKernels(build_ext):
    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler at all
            print(f"xcep: no compiled kernels ({type(exc).__name__}): Python does their work")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            print(f"xcep: kernel {ext.name} not built ({type(exc).__name__}): Python does its work")


setup(ext_modules=KERNELS, cmdclass={"build_ext": OptionalKernels})
