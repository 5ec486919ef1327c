# Copyright 2026 metasim_ros developers
# SPDX-License-Identifier: Apache-2.0
