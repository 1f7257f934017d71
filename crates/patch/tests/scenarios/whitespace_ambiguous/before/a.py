if a:
    pass
if b:
        pass
