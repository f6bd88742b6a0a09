"""`m3 faces`, the stage that finds, follows and clusters the faces of a video."""
