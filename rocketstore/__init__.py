"""rocketstore"""
