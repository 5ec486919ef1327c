# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "metasim_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test", "test.*"]),
    package_data={PACKAGE: ["scenes/*.xml", "ros/*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/config", glob("config/*")),
    ],
    python_requires=">=3.10",
    install_requires=["setuptools", "numpy", "h5py", "tqdm", "mujoco>=3.1"],
    zip_safe=True,
    maintainer="metasim_ros developers",
    maintainer_email="dev@metasim-ros.local",
    description="MuJoCo simulation node exposing the MetaSim unified state over ROS 2.",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "sim_node = metasim_ros.ros.sim_node:main",
            "metasim-snapshot = metasim_ros.snapshot_cli:main",
            "metasim-urdf = metasim_ros.urdf_cli:main",
        ],
    },
)
