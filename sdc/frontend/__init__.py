"""Model importers: ONNX (sdc.frontend.onnx); torch.export and StableHLO come later."""
