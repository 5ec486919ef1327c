"""metasim_ros core: MuJoCo and the MetaSim unified state, without any ROS import."""
from metasim_ros.core.errors import StateValidationError
from metasim_ros.core.handler import MujocoHandler
from metasim_ros.core.joints import JointReading
from metasim_ros.core.scene import ModelInfo
from metasim_ros.core.state import Action, State
from metasim_ros.scenes import default_scene_path

__all__ = ["MujocoHandler", "StateValidationError", "State", "Action", "ModelInfo",
           "JointReading", "default_scene_path"]

# snapshots (HDF5 save / load with a verification report)
from metasim_ros.core.snapshot import RestoreReport, SnapshotError, load_snapshot, save_snapshot  # noqa: E402

__all__ += ["RestoreReport", "SnapshotError", "load_snapshot", "save_snapshot"]
