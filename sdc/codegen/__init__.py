"""Codegen: plans (`plan`), the artifact writer (`artifact`); kernel renderers per target come later."""
