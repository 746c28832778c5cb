"""Builds the evoscale package: generates the gRPC stubs from ../../proto at build time.

The stubs (evoscale/v1/*_pb2.py, *_pb2_grpc.py) are not committed: `build_py` runs protoc with
the gRPC Python plugin on proto/evoscale/v1/*.proto (`-I proto`, so the modules are
`evoscale.v1.study_pb2` and so on) into the build directory, or into the source tree for an
editable install. Debian 12: `apt-get install protobuf-compiler protobuf-compiler-grpc`.

Overrides: EVOSCALE_PROTO_DIR (the folder holding evoscale/v1/*.proto), PROTOC,
GRPC_PYTHON_PLUGIN.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
PROTO_PACKAGE = Path("evoscale") / "v1"


def _find_tool(env: str, name: str, package: str) -> str:
    path = os.environ.get(env) or shutil.which(name)
    if not path or not os.access(path, os.X_OK):
        sys.exit(
            f"evoscale: cannot generate the gRPC stubs: `{name}` not found "
            f"(set {env}, or on Debian: apt-get install {package})"
        )
    return path


def _proto_dir() -> Path:
    proto = Path(os.environ.get("EVOSCALE_PROTO_DIR", HERE.parent.parent / "proto")).resolve()
    if not (proto / PROTO_PACKAGE / "study.proto").is_file():
        sys.exit(
            f"evoscale: {proto / PROTO_PACKAGE / 'study.proto'} not found; build from the "
            "evoscale repository (clients/python) or set EVOSCALE_PROTO_DIR to its proto/ folder"
        )
    return proto


def generate_stubs(out_dir: Path) -> None:
    """Runs protoc + grpc_python_plugin on every proto/evoscale/v1/*.proto into out_dir."""
    protoc = _find_tool("PROTOC", "protoc", "protobuf-compiler")
    plugin = _find_tool("GRPC_PYTHON_PLUGIN", "grpc_python_plugin", "protobuf-compiler-grpc")
    proto = _proto_dir()
    sources = sorted(str(p.relative_to(proto)) for p in (proto / PROTO_PACKAGE).glob("*.proto"))
    command = [protoc, f"-I{proto}"]
    # The well-known types (google/protobuf/timestamp.proto) ship with Debian's libprotobuf-dev.
    if Path("/usr/include/google/protobuf/timestamp.proto").is_file():
        command.append("-I/usr/include")
    command += [
        f"--plugin=protoc-gen-grpc_python={plugin}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        *sources,
    ]
    (out_dir / PROTO_PACKAGE).mkdir(parents=True, exist_ok=True)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"evoscale: protoc failed ({' '.join(command)}):\n{result.stderr}")


class BuildPyWithStubs(build_py):
    """build_py that also generates the stubs next to the package's other modules.

    They are generated after the copy, so stubs left in the source tree by an editable
    install never replace fresh ones.
    """

    def run(self) -> None:
        super().run()
        editable = getattr(self, "editable_mode", False)
        generate_stubs(HERE if editable else Path(self.build_lib))


setup(cmdclass={"build_py": BuildPyWithStubs})
