def run():
    return {"ok": True}
