"""ONNX plumbing shared by the backends: :mod:`~.export` (torch networks exported once into the model
store) and :mod:`~.proto` (ONNX graphs written as protobuf bytes without the `onnx` package).
"""
