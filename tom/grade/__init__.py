"""`tom grade`: grade a class of handout tools, one test per rule of the handout (docs/grading.md)."""
