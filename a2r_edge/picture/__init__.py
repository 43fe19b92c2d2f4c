"""One picture's path: the model's stages run on a picture (stages), tiles (tiling), regions of
interest (roi)."""
