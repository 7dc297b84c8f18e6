"""ament_python build of ros2_ik (colcon in a ROS 2 workspace, or pip; see scripts/setup.sh)."""

from glob import glob

from setuptools import find_packages, setup

package_name = 'ros2_ik'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    package_data={package_name: ['robots/*.urdf', 'robots/*.srdf', 'kinematics/*.c']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', glob('launch/*.py')),
        ('share/' + package_name + '/config', glob('config/*.yaml') + glob('config/*.rviz')),
    ],
    python_requires='>=3.10',
    install_requires=['numpy', 'defusedxml', 'trimesh',
                      # reach studies: orientations, target files, heat maps, progress bar
                      'scipy', 'pyyaml', 'matplotlib', 'tqdm'],
    extras_require={
        # reach_study --ray: shard a study over a Ray cluster
        'ray': ['ray'],
        # ros2_ik_viewer: the browser viewer (viser serves the 3D page; yourdfpy loads meshes)
        'viewer': ['viser', 'yourdfpy'],
        'test': ['pytest', 'hypothesis'],
    },
    zip_safe=True,
    maintainer='ros2_ik maintainers',
    maintainer_email='maintainers@ros2-ik.dev',
    description='Batched inverse and forward kinematics for ROS 2 (NumPy / compiled C++ / CuPy).',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'ros2_ik_node = ros2_ik.ros.node:main',
            'ros2_ik_demo = ros2_ik.demo:main',
            'reach_study = ros2_ik.reach.cli:run',
            'ros2_ik_base_placement = ros2_ik.reach.placement_cli:run',
            'ros2_ik_collision_pairs = ros2_ik.api.collision_pairs:main',
            'ros2_ik_spheres = ros2_ik.api.spheres_cli:main',
            'ros2_ik_viewer = ros2_ik.viewer.cli:main',
        ],
    },
)
