namespace brickdl::model {}
