"""metasim_ros: MuJoCo through the MetaSim unified state, over ROS 2."""
