"""The machine and what runs on it: hardware detection (system), the native CPU kernels' loader
(cpu), the CUDA library's loader (cuda), onnxruntime sessions (ort), timing (measure), the
placement of stages (scheduler) and the frame pipeline (pipeline). Nothing is imported here:
``ops`` imports ``runtime.cpu`` at a low layer while ``runtime.scheduler`` sits above ``model``."""
