"""The course's answer key: one module per lesson, each function a few lines.

Checks compare learner code with these; notebooks never import them directly.
"""
