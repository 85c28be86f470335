"""What the tasks learn with: forests and their ONNX export, embedding tables,
label files, kernel generators (shared by the tasks' offline commands).

Layer 8 of the house (``docs/layout.md``): may import the layers up to
``mirecc.taskapi``.
"""
