"""The onnxruntime backend: provider order, fallback report, strict mode, thread options."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from a2r_edge.runtime import ort  # noqa: E402


@pytest.fixture(scope="module")
def relu_model():
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_cpu_session_runs_and_reports_its_provider(relu_model):
    s = ort.OrtSession(relu_model, threads=1)
    assert s.providers == [ort.CPU] and s.fallback == []
    x = np.array([[-1, 2, -3, 4]], np.float32)
    np.testing.assert_array_equal(s.run({"x": x})[0], np.maximum(x, 0))


def test_runner_first_run_is_the_plain_one_and_later_runs_write_its_buffer(relu_model):
    """runner(): the first run at an input shape is a plain one (its result returned in the
    buffer kept for that shape); later runs bind x and write that buffer, one run each."""
    s = ort.OrtSession(relu_model, threads=1)
    calls = []
    plain = s.run
    s.run = lambda feeds: calls.append("plain") or plain(feeds)
    run = s.runner()
    x = np.array([[-1, 2, -3, 4]], np.float32)
    y = run(x)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert calls == ["plain"]
    assert run(-x) is y and calls == ["plain"]
    np.testing.assert_array_equal(y, np.maximum(-x, 0))
    z = run(np.ones((3, 4), np.float32))            # another shape: its own plain run, buffer
    assert calls == ["plain", "plain"] and z.shape == (3, 4) and z is not y


def test_missing_gpu_provider_is_reported_not_silent(relu_model):
    if ort.CUDA in ort.available_providers():
        pytest.skip("this onnxruntime offers CUDA; the fallback path needs one that does not")
    with pytest.warns(RuntimeWarning, match="not running CUDAExecutionProvider"):
        s = ort.OrtSession(relu_model, providers=[ort.CUDA, ort.CPU])
    assert s.fallback == [ort.CUDA] and s.providers == [ort.CPU]
    with pytest.raises(ort.ProviderFallbackError, match="CUDAExecutionProvider"):
        ort.OrtSession(relu_model, providers=[ort.CUDA], strict=True)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True])
def test_bad_thread_count(relu_model, bad):
    with pytest.raises(ValueError, match="threads"):
        ort.OrtSession(relu_model, threads=bad)


def test_corrupt_model_is_a_clear_error():
    with pytest.raises(Exception, match="(?i)protobuf|parse|load|invalid"):
        ort.OrtSession(b"not an onnx model")
