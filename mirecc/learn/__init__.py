"""What the tasks learn with: forests and their ONNX export, embedding tables,
label files, kernel generators (shared by the tasks' offline commands)."""
