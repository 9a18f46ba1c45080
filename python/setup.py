"""Builds the flashcl package; when the CMake build's shared library is
found it is copied into the package (flashcl/libflashcl.so), which the
package then loads first after $FLASHCL_LIBRARY, with the build's
flashcl-check program (flashcl/flashcl-check, which flashcl.check() runs).

Which library: $FLASHCL_LIBRARY if set, else ../build/libflashcl.so (the
README's build folder, seen from python/).  Without either the package is
pure Python and loads libflashcl.so.0 from the system (cmake --install, the
Debian package).  Metadata lives in pyproject.toml."""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    path = os.environ.get("FLASHCL_LIBRARY") or os.path.join(HERE, "..", "build",
                                                             "libflashcl.so")
    return os.path.realpath(path) if os.path.exists(path) else None


def built_check():
    """The flashcl-check program of the same build (flashcl.check() runs it):
    $FLASHCL_CHECK, else tools/flashcl-check beside the library's build."""
    lib = built_library()
    path = os.environ.get("FLASHCL_CHECK") or (
        lib and os.path.join(os.path.dirname(lib), "tools", "flashcl-check"))
    return os.path.realpath(path) if path and os.path.exists(path) else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib is None:
            print("flashcl: no libflashcl.so found (FLASHCL_LIBRARY, ../build): "
                  "the package will load the system's")
            return
        target = os.path.join(self.build_lib, "flashcl", "libflashcl.so")
        shutil.copyfile(lib, target)
        print("flashcl: bundled %s" % lib)
        check = built_check()
        if check is not None:
            target = os.path.join(self.build_lib, "flashcl", "flashcl-check")
            shutil.copyfile(check, target)
            os.chmod(target, 0o755)
            print("flashcl: bundled %s" % check)


class MaybeBinaryDistribution(Distribution):
    """A wheel holding the library is tagged for this platform, not 'any'."""

    def has_ext_modules(self):
        return built_library() is not None


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=MaybeBinaryDistribution)
