namespace brickdl::kernels {}
