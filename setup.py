"""The build step pyproject.toml cannot express: the wheel carries the repository's example
scenarios (scenarios/, at the checkout's root, where users of a checkout read and edit them) as
abm/example_scenarios/, whence `abm data scenarios` copies them for a user who installed the wheel.
An editable install copies nothing: abm finds them in the checkout (abm/examples.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


def _examples_module():
    """abm/examples.py, loaded by its path: abm itself cannot be imported before it is built (its
    dependencies need not be installed), and that module imports none of them at its top."""
    spec = importlib.util.spec_from_file_location("_abm_examples", ROOT / "abm" / "examples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithExamples(build_py):
    """build_py that also copies scenarios/ into the built package as abm/example_scenarios/."""

    def _example_mapping(self) -> dict[str, str]:
        """The example files' places in the build folder -> their files in the checkout."""
        examples = _examples_module()
        source = ROOT / examples.SOURCE
        built = Path(self.build_lib, "abm", examples.PACKAGED)
        return {str(built / name): str(source / name) for name in examples.example_files(source)}

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # the package is the checkout's, beside its scenarios/
            return
        for built, source in self._example_mapping().items():
            self.mkpath(str(Path(built).parent))
            self.copy_file(source, built, preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        return outputs if self.editable_mode else [*outputs, *self._example_mapping()]

    def get_output_mapping(self) -> dict[str, str]:
        # An editable install in strict mode links these into its tree of the package.
        return {**super().get_output_mapping(), **self._example_mapping()}


setup(cmdclass={"build_py": BuildPyWithExamples})
