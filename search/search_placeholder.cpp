namespace brickdl::search {}
