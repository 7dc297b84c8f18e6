"""The core imports and runs with rclpy and cupy unavailable."""

import subprocess
import sys
import textwrap


def test_core_imports_without_rclpy_and_cupy():
    code = textwrap.dedent("""
        import sys
        sys.modules['rclpy'] = None   # any 'import rclpy' now raises ImportError
        sys.modules['cupy'] = None
        import ros2_ik
        from ros2_ik import model, kinematics, backend
        from ros2_ik.kinematics import fk
        m = ros2_ik.load_robot('panda')
        T = fk(m, m.neutral_q())
        assert T.shape == (1, m.num_links, 4, 4)
        assert backend.get_backend('auto').__name__ == 'numpy'
        assert not backend.cupy_available()
        bad = [k for k in sys.modules if k.startswith(('rclpy', 'cupy')) and sys.modules[k]]
        assert not bad, bad
        print('ok')
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")


def test_cupy_backend_request_without_gpu_is_a_clear_error():
    import pytest

    from ros2_ik.backend import cupy_available, get_backend
    from ros2_ik.errors import BackendUnavailableError

    if cupy_available():
        pytest.skip("a GPU is present: the error path cannot be exercised here")
    with pytest.raises(BackendUnavailableError, match="backend='numpy'"):
        get_backend("cupy")
    with pytest.raises(BackendUnavailableError, match="unknown backend"):
        get_backend("tpu")
